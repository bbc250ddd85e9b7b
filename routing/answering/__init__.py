"""Answering: the one code path from a question to an answer.

The query's input, the session it continues, the fallback chain that runs it,
and the service every door calls.
"""
