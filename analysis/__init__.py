"""Drift analysis: signals, tables and plots from run folders."""
