# Augmenting declarations for decoder.py (Cython pure-Python mode): with KafkaMessage
# cimported, the module's ``msg: KafkaMessage`` annotations type those arguments and
# locals, so the header and body steps set the message's fields as C struct fields.
# decoder.py stays the one source.
from kwsniff.kafka.model cimport KafkaMessage
