"""kaictl (also ``kubectl kai``): queues, fair share, explain, dry-run and simulation for kai."""
