"""The exception tree of agentskit-chat, in one place.

Decoders at trust boundaries never raise on bad input: they return a result value. Exceptions
are for programmer-facing misuse (encoding an invalid value, constructing with bad arguments).

    AgentsKitChatError
    ├── ProtocolError            a value does not satisfy a wire contract
    │   ├── ContentHashError     an artifact cannot be hashed because it is not valid
    │   └── ConversationTooLargeError  messages exceed what one memory record can hold
    ├── BuildError               a knowledge artifact cannot be built from a docs folder
    ├── ConfigurationError       a component was given invalid options (``AK_CONFIG_INVALID``)
    │   ├── ConfirmationResolvedElsewhereError  another client decided the confirmation first
    │   └── ConfirmationLimitError  a session holds 1,000 confirmations, none of them decided
    ├── ToolError                a tool call was refused (``AK_TOOL_*`` codes)
    ├── AnswerCommitError        an ``answer_commit`` payload is not valid (reason + example)
    ├── SessionConflictError     a chat session snapshot changed in another client (CAS conflict)
    ├── StorageError             a session store failed, or holds a record that is not valid
    ├── AskServiceError          the Ask service refused or failed a request (a fixed diagnostic)
    ├── ChatHandlerError         the chat turn handler refused or failed a request
    ├── RetrievalError           a search index or search backend could not be used
    └── RateLimitError           a shared rate limiter could not decide (its server failed)
"""

from __future__ import annotations

__all__ = [
    "AgentsKitChatError",
    "AnswerCommitError",
    "AskServiceError",
    "BuildError",
    "ChatHandlerError",
    "ConfigurationError",
    "ConfirmationLimitError",
    "ConfirmationResolvedElsewhereError",
    "ContentHashError",
    "ConversationTooLargeError",
    "ProtocolError",
    "RateLimitError",
    "RetrievalError",
    "SessionConflictError",
    "StorageError",
    "ToolError",
]


class AgentsKitChatError(Exception):
    """Base class of every error this package raises on purpose."""


class ProtocolError(AgentsKitChatError, ValueError):
    """A value does not satisfy a wire contract.

    Attributes:
        code: The diagnostic code, such as ``PROTOCOL_INVALID_PAYLOAD``.
        message: The fixed diagnostic message; it never contains input data.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ContentHashError(ProtocolError):
    """An artifact could not be hashed because it does not decode as a valid artifact."""


class ConversationTooLargeError(ProtocolError):
    """Messages that exceed what one memory record (and so one turn snapshot) can hold: more
    than 10,000 messages or 10,000 JSON values in all.

    A chat memory raises it instead of saving (nothing is written); the chat handler answers a
    turn that would exceed it with a ``CONVERSATION_TOO_LARGE`` diagnostic that is not
    retryable, and keeps the conversation as it was.

    Attributes:
        code: Always ``AK_CONFIG_INVALID``.
        message: The fixed message.
    """

    def __init__(self, message: str = "The messages exceed the limits of a memory record.") -> None:
        super().__init__("AK_CONFIG_INVALID", message)


class BuildError(AgentsKitChatError):
    """A knowledge artifact cannot be built from a folder of Markdown.

    Raised for malformed front matter, declared entries that break an artifact limit, unreadable
    files and invalid build options. Nothing has been written when it is raised.

    Attributes:
        reason: What is wrong, without the location.
        file: The offending file, as a path the user can open, or ``None`` for a bad option.
        line: The 1-based line in ``file``, or ``None`` when the whole file is concerned.
    """

    def __init__(self, reason: str, *, file: str | None = None, line: int | None = None) -> None:
        location = file if line is None or file is None else f"{file}:{line}"
        super().__init__(f"{location}: {reason}" if location else reason)
        self.reason = reason
        self.file = file
        self.line = line


class ConfigurationError(AgentsKitChatError, ValueError):
    """A component was constructed with invalid options.

    Attributes:
        code: Always ``AK_CONFIG_INVALID``.
        message: A fixed sentence naming the invalid option; it never contains the value.
        hint: A fixed sentence saying how to use the component correctly, or ``None``.
    """

    code = "AK_CONFIG_INVALID"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfirmationResolvedElsewhereError(ConfigurationError):
    """A decision on an action confirmation lost the race: another client (or worker) claimed
    the record first, so this call did not change it and ran nothing.

    Raised by ``ActionConfirmation.approve``/``reject`` when the claim hook refuses, and by the
    chat handler's decision turns; the chat handler answers it ``CONFIRMATION_UNAVAILABLE``.
    """

    def __init__(self, *, hint: str | None = None) -> None:
        super().__init__("Action confirmation was already resolved by another client.", hint=hint)


class ConfirmationLimitError(ConfigurationError):
    """A proposal found no room: the confirmation (one session) holds its most records,
    1,000, and none of them is decided (``approved``, ``rejected`` or ``expired``).

    Decided records make room by themselves: the oldest of them are dropped when a proposal
    needs the space. Records that wait for a human (``pending``) or were claimed and not
    settled (``approving``, ``rejecting``, ``expiring``) are never dropped, so a session with
    1,000 of them takes no new proposal until some are decided. The chat handler answers it
    ``CONFIRMATION_LIMIT_REACHED`` (not retryable) and keeps the conversation as it was.
    """

    def __init__(self, *, hint: str | None = None) -> None:
        super().__init__("Action confirmation limit is reached.", hint=hint)


class ToolError(AgentsKitChatError):
    """A proposed tool call was refused before anything ran.

    Attributes:
        code: ``AK_TOOL_NOT_FOUND`` (no such tool), ``AK_TOOL_INVALID_INPUT`` (the arguments do
            not satisfy the tool's schema) or ``AK_TOOL_FORBIDDEN`` (the authorizer denied it;
            the message is the denial reason).
        message: A fixed sentence, or the authorizer's reason; never the arguments.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AnswerCommitError(AgentsKitChatError, ValueError):
    """An ``answer_commit`` payload cannot be rendered.

    Its text is the one-line reason, a newline, then ``Example:`` and a minimal valid payload as
    compact JSON, ready to be returned to a model so it can repair its call. Neither part contains
    any value of the payload: places are named by their path (``fields[1].value``).

    Attributes:
        reason: What is wrong and how to fix it, on one line.
        example: A minimal valid payload, as compact JSON.
    """

    def __init__(self, reason: str, example: str) -> None:
        super().__init__(f"{reason}\nExample: {example}")
        self.reason = reason
        self.example = example


class SessionConflictError(AgentsKitChatError):
    """A chat session snapshot changed in another client since this one loaded it.

    Raised by ``ChatSession.persist()`` (and what awaits it, such as ``claim_turn``) when the
    session storage refuses the compare-and-set save. Reload the session and try again.
    """

    def __init__(self, message: str = "Session snapshot changed in another client.") -> None:
        super().__init__(message)
        self.message = message


class StorageError(AgentsKitChatError):
    """A session store could not load or save, or holds a record that is not valid.

    The message is a fixed sentence naming the backend; it never contains a stored value, a key
    or a connection URL. The driver's own exception is not chained, because driver messages may
    echo data or connection details.

    Attributes:
        message: The fixed message.
        retryable: ``True`` for transient failures (the server is unreachable, a lock timed
            out), so a retry may succeed; ``False`` for a corrupt record or a closed store.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class AskServiceError(AgentsKitChatError):
    """The Ask service refused or failed a request, with one of its fixed diagnostics.

    Raised inside the service pipeline (and by hooks that want a specific answer, such as an
    authenticator answering ``ASK_UNAUTHORIZED``) and turned into an HTTP error or a trailing
    ``error`` event. Also raised by the service factory for invalid options. The message is a
    fixed sentence; it never contains request data.

    Attributes:
        status: The HTTP status (for in-stream failures, the internal classification).
        code: One of the eleven ``ASK_*`` diagnostic codes.
        message: The fixed message.
        retryable: Whether a retry of the same request can succeed.
        retry_after: Seconds for the ``retry-after`` header, when rate limiting supplies one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


class ChatHandlerError(AgentsKitChatError):
    """The chat turn handler refused or failed a request, with a fixed diagnostic.

    Raised by the handler factory for invalid options (500 ``SERVER_INVALID_CONFIG``); a host
    hook (``authenticate``, ``resolve_definition``, ``session_storage``, ``chat_memory``) may
    raise it to answer with a status and code of its own. The message is a fixed sentence
    that the client sees; it must not contain request data.

    Attributes:
        status: The HTTP status of the JSON error response (before the stream starts).
        code: The diagnostic code (``^[A-Z][A-Z0-9_]*$``).
        message: The fixed message.
        retryable: Whether a retry of the same request can succeed.
    """

    def __init__(self, status: int, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable


class RetrievalError(AgentsKitChatError):
    """A retriever could not search.

    Its index is closed or unusable, its server is unreachable, or every member of a federated
    retriever failed. The message is a fixed sentence; it never contains the query, an excerpt
    or a connection URL, and the driver's own exception is not chained.

    Attributes:
        message: The fixed message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RateLimitError(AgentsKitChatError):
    """A shared rate limiter could not decide whether a request may proceed.

    Its server is unreachable or answered with an error. The message is a fixed sentence; it
    never contains a subject id or a connection URL, and the driver's own exception is not
    chained. The Ask service answers such a request with its generic internal error.

    Attributes:
        message: The fixed message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
