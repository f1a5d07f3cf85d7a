# Augmenting declarations for pipeline.py (Cython pure-Python mode): with the model's
# classes cimported, the ``Exchange`` / ``KafkaMessage`` annotations type the selection
# loop's locals, read as C struct fields. pipeline.py stays the one source.
from kwsniff.kafka.model cimport KafkaMessage, Exchange
