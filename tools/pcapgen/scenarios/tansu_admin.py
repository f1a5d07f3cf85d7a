"""placeholder"""
SCENARIOS = []
