"""One module per kaictl command."""
