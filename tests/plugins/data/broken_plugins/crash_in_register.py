"""A plugin whose register() fails half-way (tests: what it registered is removed)."""


def register(api):
    api.payload_decoder(lambda data, where: "SHOULD NEVER BE SEEN", topics="*",
                        parts=("key", "value"))
    raise OSError("configuration file missing")
