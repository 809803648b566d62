"""
The engine-neutral journal: runs, steps, the I/O thread, masking, fingerprints, divergence, usage
and the encryption of stored text. It imports neither an agent SDK nor Airflow's task machinery:
what it needs of the system it runs in (the Fernet key, the secrets masker, the journal of the
running task) is installed by that system's binding (``durable/airflow/binding.py``).
"""
