"""How a task's bytes are stored, one small frozen object per kind, each owning its block
iteration: the engine asks a storage for its chunks or blocks and never switches on kinds."""
