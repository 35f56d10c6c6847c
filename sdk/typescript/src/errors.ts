/**
 * Errors of the SDK: every error answer of the server becomes an
 * AirlockError subclass chosen by its stable code.
 */

export class AirlockError extends Error {
  /** HTTP status (0 for errors inside a stream or of the connection). */
  readonly status: number;
  /** The server's stable error code ("not_found", "invalid", ...). */
  readonly code: string;
  constructor(message: string, status = 0, code = "") {
    super(status ? `${message} (${status} ${code})` : message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
  }
}

/** 400: bad input; the message says which field and why. */
export class InvalidError extends AirlockError {}
/** 401: no API key, or a wrong or revoked one. */
export class UnauthenticatedError extends AirlockError {}
/** 403: the sandbox's policy forbids it. */
export class PermissionDeniedError extends AirlockError {}
/** 404: no such sandbox, process, file, command or interpreter. */
export class NotFoundError extends AirlockError {}
/**
 * 409: it already exists, or the sandbox is not in a state the request
 * needs (paused or frozen: resume it; being paused or destroyed, stopped).
 */
export class ConflictError extends AirlockError {}
/**
 * 409: stored state (a checkpoint, a paused sandbox's files) no longer
 * matches the manifest of hashes recorded with it; the message names the
 * file. The sandbox is left as it was.
 */
export class CorruptError extends ConflictError {}
/** 410: the sandbox ended while the request ran. */
export class ClosedError extends AirlockError {}
/** 413 */
export class TooLargeError extends AirlockError {}
/** 429: a quota or resource limit. */
export class LimitExceededError extends AirlockError {}
/** 501: the backend cannot do this. */
export class NotSupportedError extends AirlockError {}
/** 503: a backend or protection is missing on the server's host. */
export class UnavailableError extends AirlockError {}
/** 504 */
export class TimeoutError extends AirlockError {}

/** 404: the command does not exist in the sandbox. */
export class CommandNotFoundError extends NotFoundError {}

/** 403: the command exists but cannot be executed. */
export class CannotExecuteError extends PermissionDeniedError {}

/** A command run with check: true exited with a non-zero code. */
export class CommandExitError extends AirlockError {
  readonly result: { exit_code: number; stdout: string; stderr: string };
  constructor(result: { exit_code: number; stdout: string; stderr: string }) {
    super(`command exited with code ${result.exit_code}: ${result.stderr.slice(-500)}`);
    this.result = result;
  }
}

const byCode: Record<string, new (m: string, s: number, c: string) => AirlockError> = {
  invalid: InvalidError,
  unsupported_media_type: InvalidError,
  method_not_allowed: InvalidError,
  unauthenticated: UnauthenticatedError,
  permission_denied: PermissionDeniedError,
  not_found: NotFoundError,
  command_not_found: CommandNotFoundError,
  cannot_execute: CannotExecuteError,
  exists: ConflictError,
  conflict: ConflictError,
  corrupt: CorruptError,
  closed: ClosedError,
  too_large: TooLargeError,
  insufficient_storage: LimitExceededError,
  limit_exceeded: LimitExceededError,
  not_supported: NotSupportedError,
  unavailable: UnavailableError,
  timeout: TimeoutError,
};

/** The error for an error answer. */
export function errorFor(status: number, code: string | undefined, message: string): AirlockError {
  const C = (code && byCode[code]) || AirlockError;
  return new C(message, status, code || "http");
}
