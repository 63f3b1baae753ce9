"""What a per-key <Error> in a whole DeleteObjects answer says about that key's delete
(review rev38z5 findings 1 and 3).

S3's reference gives each key's result as "the result of that delete, success or failure"
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html) and the per-key
Error's `Code` as a string "that uniquely identifies an error condition", from S3's list
of error codes (https://docs.aws.amazon.com/AmazonS3/latest/API/API_Error.html; the same
list is the `Error` shape's `Code` documentation in botocore's model of S3,
`botocore/data/s3/2006-03-01/service-2.json`, whence the descriptions quoted below).
Nothing there makes a code the client does not know a refusal: MinIO answers a key whose
write quorum was not met `SlowDownWrite` (its `cmd/api-errors.go`, as review rev38z5
found), a gateway relays its backend's code (Azure Storage's `OperationTimedOut`: "The
operation may or may not have succeeded on the server side").

No code here decides a record (review rev38z9): a refusal may be the answer to an
intermediary's second copy while its first deleted the key, so every key answered an error
waits and is asked at the journal's read-back (THE RULE, `s3.py`). What these sets decide
is only whether the key is worth a HEAD at once (`S3Store._settle`): a refusal in S3's list
(the request refused before any work on the key: who asks, what is asked, where, the
object's state, a conflict, a throttle) most likely left the key there, so it is not asked
until the read-back; any other code may have been applied, and is asked at once (absent:
`gone_unattributed` without the wait). A 412 (`CHANGED`) is asked at once too: an object
there at another version than listed is `changed`.
"""

from __future__ import annotations

# "The key is not there" (a conditional delete of an absent key: S3 User Guide,
# conditional-deletes.html; SeaweedFS answers NoSuchKey too).
NOT_THERE = frozenset({"NoSuchKey", "404", "NotFound"})
# A conditional delete whose object is no longer the one listed (412 Precondition Failed,
# conditional-deletes.html): refused, asked which (rewritten or absent: `S3Store._refused`).
CHANGED = frozenset({"PreconditionFailed", "412"})
# Refusals in S3's list of error codes (code: "description", HTTP status there).
REFUSED = frozenset({
    # Who asks: AccessDenied: "Access Denied" (403); AccountProblem: "There is a problem
    # with your Amazon Web Services account that prevents the action from completing
    # successfully" (403); AllAccessDisabled: "All access to this Amazon S3 resource has
    # been disabled" (403); InvalidAccessKeyId, SignatureDoesNotMatch (403), ExpiredToken,
    # InvalidToken, TokenRefreshRequired (400): the caller's credentials refused.
    "AccessDenied", "AccountProblem", "AllAccessDisabled", "InvalidAccessKeyId",
    "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
    # What is asked: InvalidArgument: "Invalid Argument"; InvalidRequest; KeyTooLongError:
    # "Your key is too long"; MalformedXML; InvalidBucketName: "The specified bucket is
    # not valid" (400 each).
    "InvalidArgument", "InvalidRequest", "KeyTooLongError", "MalformedXML",
    "InvalidBucketName",
    # Where: NoSuchBucket: "The specified bucket does not exist" (404); NoSuchVersion:
    # "the version ID specified in the request does not match an existing version" (404).
    "NoSuchBucket", "NoSuchVersion",
    # The object's state, the method: InvalidObjectState: "The action is not valid for the
    # current state of the object" (403); MethodNotAllowed: "The specified method is not
    # allowed against this resource" (405); NotImplemented: "A header you provided implies
    # functionality that is not implemented" (501).
    "InvalidObjectState", "MethodNotAllowed", "NotImplemented",
    # A conflict: OperationAborted: "A conflicting conditional action is currently in
    # progress against this resource. Try again." (409).
    "OperationAborted",
    # A throttle: SlowDown: "Reduce your request rate" (503 Slow Down), S3's protection
    # mechanism refusing the request ("SlowDown errors can occur when a high request rate
    # triggers one of these mechanisms", userguide/ErrorBestPractices.html), as for a
    # whole request (`attempts._REFUSED_503`). This code only: MinIO's `SlowDownWrite` (a
    # write quorum not met) and `SlowDownRead`, a gateway's `Throttling`, are not S3's.
    "SlowDown",
})
# Not here, so unsure: InternalError ("We encountered an internal error. Please try
# again.", 500: such a request "might not have processed", ErrorBestPractices.html),
# ServiceUnavailable ("Service is unable to handle request.", 503), RequestTimeout ("Your
# socket connection to the server was not read from or written to within the timeout
# period", 400): review rev38z4 finding 1.


def may_have_applied(code: str) -> bool:
    """A key answered `code` may have been deleted by that request (or may yet be), so is
    asked of the store at once: any code not known to mean not applied (`REFUSED`), absent
    (`NOT_THERE`) or refused by its condition (`CHANGED`). Whatever it says, a key answered
    an error is not decided by it (THE RULE, `s3.py`)."""
    return code not in REFUSED and code not in NOT_THERE and code not in CHANGED
