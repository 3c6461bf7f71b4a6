"""Scheduling actions. Each works on a Session of tentative operations committed or rolled back per job."""
