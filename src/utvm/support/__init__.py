"""Support code shared by the runtime, the compiler and the platforms (C builds, caching)."""
