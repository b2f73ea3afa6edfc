"""Offline passage search for grounded debates: collections, BM25, an MCP server and its clients.

``import harness.search`` stays light: bm25s is imported on the first index
build or load, mcp and the adapters when a server or a session starts.
"""

from harness.search.client import LocalSearch, Searcher, SearchFault, SearchSession, open_search
from harness.search.collections import Collection, CollectionError, Passage, load_collection
from harness.search.server import build_server

__all__ = [
    "Collection",
    "CollectionError",
    "LocalSearch",
    "Passage",
    "SearchFault",
    "SearchSession",
    "Searcher",
    "build_server",
    "load_collection",
    "open_search",
]
