"""A plugin whose hooks return values kwsniff cannot use (tests: rejected, reported)."""


class Opaque:
    pass


def register(api):
    api.payload_decoder(lambda data, where: {"opaque": Opaque()}, topics="*",
                        parts=("value",), name="opaque")
    api.exchange_field("count", lambda exchange: "three", type="int")
