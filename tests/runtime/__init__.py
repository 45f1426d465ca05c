"""Tests of the host runtime system (utvm.runtime, utvm.nd, utvm.demo)."""
