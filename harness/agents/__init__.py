"""One role per module: persona, thinking, critique, topic."""

from harness.agents.critique import CritiqueAgent, CritiqueOutput
from harness.agents.persona import PersonaAgent, PersonaOutput
from harness.agents.thinking import ThinkingAgent, ThinkingOutput
from harness.agents.topic import TopicAgent, TopicOutput

__all__ = [
    "CritiqueAgent",
    "CritiqueOutput",
    "PersonaAgent",
    "PersonaOutput",
    "ThinkingAgent",
    "ThinkingOutput",
    "TopicAgent",
    "TopicOutput",
]
