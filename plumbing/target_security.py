"""TLS and credential references towards a gNMI target: one model for the topology file and every stage.

Paths are to PEM files and secrets come from environment variables or files, never inline (a topology or
config file is shared and logged; a secret in it leaks). ``Credentials.resolve`` reads the secret only when a
connection needs it and says exactly which variable or file is missing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, SecretStr, model_validator


class SecretError(ValueError):
    """A referenced secret is missing or unreadable; ``str()`` names the field and the variable or file."""


class SecurityModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TlsConfig(SecurityModel):
    """TLS towards a switch's gNMI server. Paths are to PEM files; ``enabled: false`` = plaintext gRPC."""

    enabled: bool = False
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    skip_verify: bool = False
    server_name: str | None = None


class Credentials(SecurityModel):
    """gNMI username/password references (sent as call metadata). The password only from env or a file.

    ``password_key``: with ``password_file``, the file is YAML and the password is the value at these keys (a
    gnmic targets file's ``targets.<address>.password``): a password the user wrote in such a file is read from
    it when a connection needs it, never copied into another file, a log or a model's repr.
    """

    username: str | None = None
    username_env: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    password_key: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def no_inline_password(cls, data: Any) -> Any:
        if isinstance(data, dict) and "password" in data:
            raise ValueError("passwords are not accepted inline; use password_env or password_file")
        return data

    def resolve(self) -> tuple[str, SecretStr] | None:
        """(username, password) or None when no credentials are configured.

        Raises SecretError naming the variable or file that is missing.
        """
        user = self.username
        if self.username_env:
            user = os.environ.get(self.username_env)
            if user is None:
                raise SecretError(f"credentials.username_env: environment variable {self.username_env} is not set")
        password: str | None = None
        if self.password_env:
            password = os.environ.get(self.password_env)
            if password is None:
                raise SecretError(f"credentials.password_env: environment variable {self.password_env} is not set")
        elif self.password_file:
            try:
                password = self.password_file.read_text(encoding="utf-8").strip()
            except OSError as e:
                raise SecretError(
                    f"credentials.password_file: cannot read {self.password_file}: {e.strerror}") from None
            if self.password_key:
                password = _at_key(password, self.password_file, self.password_key)
        if user is None and password is None:
            return None
        return user or "", SecretStr(password or "")


def _at_key(text: str, file: Path, keys: tuple[str, ...]) -> str:
    """The scalar at ``keys`` of the YAML ``text`` (the password itself is never put in the error)."""
    where = f"credentials.password_key: {file}: {'.'.join(keys)}"
    try:
        node: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SecretError(f"{where}: the file is not YAML") from None
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            raise SecretError(f"{where}: no such key")
        node = node[k]
    if node is None or isinstance(node, dict | list):
        raise SecretError(f"{where}: not a password (empty or not a scalar)")
    if not isinstance(node, str):  # YAML reads 0123 as 83 and yes as True: the text written is lost
        raise SecretError(f"{where}: not a string (YAML read it as a {type(node).__name__}): quote it")
    return node
