# Augmenting declarations for skim.py (Cython pure-Python mode): with the model's
# classes cimported, the ``Exchange`` / ``KafkaMessage`` annotations type the lane's
# arguments, read as C struct fields. skim.py stays the one source.
from kwsniff.kafka.model cimport KafkaMessage, Exchange
