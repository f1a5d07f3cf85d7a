"""A plugin whose every hook raises (tests: reported once per hook, decoding goes on)."""


def register(api):
    def decoder(data, where):
        raise ValueError(f"cannot decode {len(data)} bytes")

    def field(exchange):
        raise KeyError("no such thing")

    api.payload_decoder(decoder, topics="*", parts=("key", "value"), name="crasher")
    api.exchange_field("always_fails", field, digest=True)
