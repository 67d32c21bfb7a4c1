"""What every layer of golem builds on: the exception tree (errors), stopping an
attempt from another thread (cancel), signals as exceptions (signals), and
what every text passes through on its way out (outgoing). Imports nothing
of golem above it."""
