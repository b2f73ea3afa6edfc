"""One role per module: persona, thinking, critique and topic (drift); role
generator, analyst, summariser, judge and synthesiser (panel); speaker,
fact-checker and verdict judge (moderated); advocate and evaluator
(judge_refine). ``common``
and ``transcript`` hold what their prompts share."""

from harness.agents.advocate import AdvocateAgent, AnswerOutput, ArgumentOutput
from harness.agents.analyst import AnalystAgent, AnalystOutput
from harness.agents.critique import CritiqueAgent, CritiqueOutput
from harness.agents.evaluator import EvaluationOutput, EvaluatorAgent
from harness.agents.fact_checker import FactCheckerAgent, FactCheckOutput
from harness.agents.judge import JudgeAgent, JudgeOutput
from harness.agents.persona import PersonaAgent, PersonaOutput
from harness.agents.role_generator import RoleGeneratorAgent, roles_schema
from harness.agents.speaker import SpeakerAgent, SpeechOutput
from harness.agents.summarizer import SummarizerAgent, SummaryOutput
from harness.agents.synthesizer import SynthesisOutput, SynthesizerAgent
from harness.agents.thinking import ThinkingAgent, ThinkingOutput
from harness.agents.topic import TopicAgent, TopicOutput
from harness.agents.verdict import VerdictAgent, verdict_schema

__all__ = [
    "AdvocateAgent",
    "AnalystAgent",
    "AnalystOutput",
    "AnswerOutput",
    "ArgumentOutput",
    "CritiqueAgent",
    "CritiqueOutput",
    "EvaluationOutput",
    "EvaluatorAgent",
    "FactCheckOutput",
    "FactCheckerAgent",
    "JudgeAgent",
    "JudgeOutput",
    "PersonaAgent",
    "PersonaOutput",
    "RoleGeneratorAgent",
    "SpeakerAgent",
    "SpeechOutput",
    "SummarizerAgent",
    "SummaryOutput",
    "SynthesisOutput",
    "SynthesizerAgent",
    "ThinkingAgent",
    "ThinkingOutput",
    "TopicAgent",
    "TopicOutput",
    "VerdictAgent",
    "roles_schema",
    "verdict_schema",
]
