"""Code golem runs inside the test process, with the test interpreter, from a read-only
directory of its own: the unittest driver, the pytest launcher and plugin, the record stream
and guard they share (evidence.py), and the node reporter. None of it imports golem."""
