"""One role per module: persona, thinking, critique and topic (drift); role
generator, analyst, summariser, judge and synthesiser (panel). ``common``
and ``transcript`` hold what their prompts share."""

from harness.agents.analyst import AnalystAgent, AnalystOutput
from harness.agents.critique import CritiqueAgent, CritiqueOutput
from harness.agents.judge import JudgeAgent, JudgeOutput
from harness.agents.persona import PersonaAgent, PersonaOutput
from harness.agents.role_generator import RoleGeneratorAgent, roles_schema
from harness.agents.summarizer import SummarizerAgent, SummaryOutput
from harness.agents.synthesizer import SynthesisOutput, SynthesizerAgent
from harness.agents.thinking import ThinkingAgent, ThinkingOutput
from harness.agents.topic import TopicAgent, TopicOutput

__all__ = [
    "AnalystAgent",
    "AnalystOutput",
    "CritiqueAgent",
    "CritiqueOutput",
    "JudgeAgent",
    "JudgeOutput",
    "PersonaAgent",
    "PersonaOutput",
    "RoleGeneratorAgent",
    "SummarizerAgent",
    "SummaryOutput",
    "SynthesisOutput",
    "SynthesizerAgent",
    "ThinkingAgent",
    "ThinkingOutput",
    "TopicAgent",
    "TopicOutput",
    "roles_schema",
]
