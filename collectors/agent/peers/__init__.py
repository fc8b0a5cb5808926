"""How agents learn each QP's remote end: matching QP ends and exchanging them over Kafka."""
