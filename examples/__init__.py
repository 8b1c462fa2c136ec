"""Reference applications: each folder is a chat you run with one command (see README.md)."""
