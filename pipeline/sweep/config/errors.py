"""``ConfigError``, the one error a config gets: a module of its own that imports nothing, so
every layer that checks a setting (the config, the engine, each kind) raises the same one."""


class ConfigError(ValueError):
    """An invalid setting: ``key`` names it, the message says what is allowed."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
