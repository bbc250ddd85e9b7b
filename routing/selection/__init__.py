"""Selection: from an intent to an ordered list of candidates (flow x backend).

Candidates, their scores, the traffic breaker and exploration.
"""
