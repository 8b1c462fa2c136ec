"""Tests of the reference applications in examples/."""
