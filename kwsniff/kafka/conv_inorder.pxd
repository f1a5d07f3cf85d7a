# Augmenting declarations for conv_inorder.py: a link of the conversation's chain of
# extension types (attributes: conv_release.pxd).
from kwsniff.kafka.conv_release cimport ReleaseControl
from kwsniff.kafka.framing cimport Frame
from kwsniff.kafka.model cimport KafkaMessage

cdef class InOrderPairing(ReleaseControl):
    cpdef _place(self, KafkaMessage msg, Frame f)
