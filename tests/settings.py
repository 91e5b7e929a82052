"""The product's settings for the test processes and the processes tests start, with one
change: passwords are hashed with MD5 instead of 1,000,000 rounds of PBKDF2.

A PBKDF2 hash takes about a second on the two loaded cores CI has, and the suite makes one
for every user it creates and every browser log-in checks one: minutes of a run spent on
hashing that no test is about. Django's own documentation recommends this for tests.
"""

from latencyboard.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
