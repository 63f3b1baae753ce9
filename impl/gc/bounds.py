"""How long a round's tasks may still send a delete once its STOP marker is durable (issue
38, review rev38m findings 1 and 2): the bound a recovery waits out before it reads a
round's journal back, so its record holds every deletion of the round.

A task sends a batch (its intent PUT, then its DeleteObjects and their retries) only when
told to go: by the driver's gate (`gate.py`), or, with no gate, by a HEAD of STOP that
found none. The chain, each link enforced in code:

1. The driver's gate says "go" only if its watch sent a HEAD of `<round>/STOP` at most
   `LOOK_FRESH_S` before and that HEAD found none (`watch.RoundWatch.fresh`; the time is
   taken before the request is sent), and the lease is firm (`lease.Lease.firm`). The
   watch HEADs it from a thread of its own once the last HEAD is `STOP_LOOK_EVERY_S` old,
   each HEAD in its own thread, so a slow answer does not delay the next send: the gate
   stays open on a store answering within `LOOK_FRESH_S - STOP_LOOK_EVERY_S` (60 s) a
   request (issue 38: with the HEADs inside the looks, two requests apart, it closed at
   30 s). A look HEADs it too where one is due (and at its end if the next look's would
   come more than `NEXT_HEAD_WITHIN_S` after the last). A HEAD sent after STOP was
   written sees it (S3 is strongly consistent for read-after-write:
   https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel),
   so no "go" is decided later than `LOOK_FRESH_S` after STOP is durable.
2. A task takes the time before it asks (`store.send_clock`: CLOCK_BOOTTIME on Linux, so
   the time a suspended or stopped executor spends counts in each CHECK); no request of
   that batch is sent later than `send_within_s` after it (`store.send_by`: S3 refuses to
   send the PutObject or DeleteObjects attempt, botocore retries included, checked before
   botocore's send, again at each connect and right before each write of the request's
   bytes, `store/connectcheck.py`; a local store refuses the rename, link or unlink). The
   checks cannot cover the time between the last one and the write it allows, nor what
   the write handed the kernel (below, "Outside the bound"; review rev38z13 finding 1).
   What the bound limits is when a request is SENT; from then to the server having the
   whole request or never having it, `REQUEST_IN_WITHIN_S` (below: the connect, the
   request's two writes, the wait for the answer's first byte, each bounded by a
   timeout). How long the client then waits is not bounded by the timeouts
   as a total: urllib3's read timeout is "the maximum amount of time (in seconds) to wait
   between consecutive read operations for a response from the server" (urllib3's
   `util.Timeout`, https://urllib3.readthedocs.io/en/stable/reference/urllib3.util.html
   #urllib3.util.Timeout), per socket read, so a trickled answer keeps an attempt open
   longer (review rev38n finding 8). That does not change the bound: the server had the
   whole request before it answered.
3. An intermediary between the task and the server (a proxy, a load balancer, an SDK
   layer) may send the request more than once, and relay any one copy's answer (review
   rev38z9): nginx passes a request to the next upstream on an error or a timeout, a
   non-idempotent one (POST: DeleteObjects) only with `proxy_next_upstream ...
   non_idempotent`, and only "if nothing has been sent to a client yet"
   (http://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_next_upstream); when
   the client closes its connection first it closes the upstream one
   (`proxy_ignore_client_abort`, default off, same page), and an Envoy route's retries
   likewise end with the downstream request. THE INTERMEDIARY'S BOUND: every copy reaches
   the server before the client's attempt ends, and none is sent after. The client's own
   kernel is the first such hop (review rev38z11 finding 1): a request still in its send
   queue when the attempt ends (a read timeout, a kill -9) was delivered after it by a
   graceful close, for minutes (tcp(7) `tcp_orphan_retries`). Every connection of our S3
   clients is closed with a reset (`SO_LINGER` {1, 0}, `store/resetclose.py`): the
   unsent queue is dropped at the attempt's end, on exit too. What the server host had
   received by then it received before the end; the rest never comes, and a truncated
   body is no request. A segment already on the wire at the end reaches the server a
   network delay later: `APPLIED_WITHIN_S`'s spare `CONNECT_TIMEOUT_S` covers one up to
   that long. A server applies a request within `READ_TIMEOUT_S` of receiving it (the
   bound's assumption about the server, below; "receiving": its host has the bytes,
   whenever its application reads them). So a request's last copy is applied at most
   `READ_TIMEOUT_S` after the task's attempt ended (`APPLIED_WITHIN_S`, measured from
   that end, covers it: the live driver's read-back waits from the end of the latest
   attempt naming a key, `s3.py`'s rule; a recovery from when the tasks were seen gone),
   and at most `REQUEST_IN_WITHIN_S + READ_TIMEOUT_S` after the task sent it.
4. So the last request of a round told "go" is sent no later than
   `LOOK_FRESH_S + send_within_s` after its STOP is durable, and its last copy applied
   `REQUEST_IN_WITHIN_S + READ_TIMEOUT_S` after that: `stop_within_s` = `LOOK_FRESH_S`
   plus a quarter of the lease plus `READ_TIMEOUT_S` (600 s lease: 300 s; it was 240 s,
   which counted a request applied within `READ_TIMEOUT_S` of its send's connect, short
   by one `READ_TIMEOUT_S` of a copy sent as the attempt ended: review rev38z9's
   "recovery's bound"; the send window is 50 s, not 80 s, since the request's own writes
   and a TLS handshake are counted: review rev38z11 finding 1). The round writes it in its
   START; the recovery waits that long after writing STOP, before reading the journal back
   (`recover.py`). By construction, for a round a recovery stops while its driver is
   alive too (`gc-admin reset --force --even-if-running`; `--force` on a driver alive on
   another host): the lease margin below covers only a driver that lost its lease.

Outside the bound: a server that applies a request more than `READ_TIMEOUT_S` after it got
it (the client cannot see that; such a batch's outcome is resolved by asking the store, and
a deletion applied after the read-back is in no record), an intermediary past the client's
host that sends a copy after its client's attempt ended, a segment the network delays by
more than `CONNECT_TIMEOUT_S`, and a task whose clock runs slow by more than the margin.
Nor a task process or host STOPPED (SIGSTOP, a cgroup freeze such as `docker pause`, a
paused or suspended VM or host) for longer than the recovery's wait at the wrong moment
(review rev38z13 finding 1): between its last check and the `sendall` that check allowed
(microseconds now that each write is checked: `store/connectcheck.py`), or AFTER bytes of
its request entered its kernel's send queue. What is queued goes on when the host runs
again (TCP's retransmission timers run on the kernel's clock, and a merely stopped process
does not stop its kernel's sending at all), while the attempt's end and its reset close
(`store/resetclose.py`) come from a socket timeout of the process, which bounds a wait
inside one call, not a pause between calls, nor a suspended host (no timer runs). No
client-side check can bound that: any check is followed by an action the pause can
delay (M. Kleppmann, "How to do distributed locking", 2016, https://martin.kleppmann.com/
2016/02/08/how-to-do-distributed-locking.html: a process paused after checking its lease
writes after the lease expired, unless the storage checks a fencing token). S3 offers no
such fence for DeleteObjects: the only per-object condition is an ETag (the `ETag` of each
`ObjectIdentifier`, https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html), and a
garbage key's ETag is unchanged, so a late delete passes it. The recovery's wait
(`stop_within_s`) is a delay of Chubby's lock-delay kind (M. Burrows, "The Chubby lock
service for loosely-coupled distributed systems", OSDI 2006, section 2.4: a lock freed
because its holder failed is not given out again for a lock-delay, an imperfect guard
against its delayed requests, which the paper pairs with sequencers the servers check):
it covers a pause shorter than itself, not a longer one. Such a late delete removes only a
key the round had decided was garbage; what it breaks is the record ("not deleted", or
unknown resolved as still there, for a key then removed).
`Lease.firm` also keeps a quarter of the lease in hand: the last "go" under a firm lease is
answered a quarter before the lease expires, and for a lease of at least 4 x (1 s +
`REQUEST_IN_WITHIN_S`) = 404 s (`send_within_s` is at least 1 s) the batch's last request
was sent and in the server's hands (or never will be) by the time a recovery may take the
round for dead, its last copy applied `READ_TIMEOUT_S` after. The default lease is 600
s and no option sets another; a shorter lease (tests only) leaves the recovery's wait as
the only margin (review rev38n finding 8).
"""

from __future__ import annotations

# The client's connect and read timeouts of each S3 attempt (botocore's Config, cited there).
from epochgc.impl.store.s3 import CONNECT_TIMEOUT_S, READ_TIMEOUT_S

__all__ = ["APPLIED_WITHIN_S", "CONNECT_TIMEOUT_S", "HEADS_IN_FLIGHT", "LOOK_FRESH_S",
           "MAX_STOP_WITHIN_S", "NEXT_HEAD_WITHIN_S", "READ_TIMEOUT_S", "REQUEST_IN_WITHIN_S",
           "STOP_LOOK_EVERY_S", "send_within_s", "stop_within_s"]

# The driver's gate says "go" only within this long after a HEAD of STOP (sent then) found
# none. A look is that HEAD, the pause state and the health reports (about 5 requests one
# after another) plus the watch's interval (2 s): 90 s leaves room for ~17 s a request.
LOOK_FRESH_S = 90.0
# The watch HEADs STOP once its last HEAD of it was sent this long ago (a look every ~2 s
# + 3 requests would HEAD it 5-10 times as often: issue 38's request count): one HEAD per
# 30 s; the gate's "go" then rests on a HEAD sent at most this plus one request ago, so
# it stays open up to `LOOK_FRESH_S - STOP_LOOK_EVERY_S` (60 s) a request; a recovery's
# STOP is seen within this plus one request.
STOP_LOOK_EVERY_S = LOOK_FRESH_S / 3
# HEADs of STOP in flight at once, at most: by the time a fourth would be sent (90 s after
# the oldest) the oldest no longer backs a "go" when it answers.
HEADS_IN_FLIGHT = round(LOOK_FRESH_S / STOP_LOOK_EVERY_S)
# The longest from one clear HEAD of STOP's send to the next HEAD's send: the next one's
# answer then has `STOP_LOOK_EVERY_S` before the gate's freshness runs out. A look ends
# with a HEAD if the next look's (the watch's interval later) would come later than this
# (review rev38o finding 6: a ~30 s look ended 30 s after its HEAD; 60 s later the next
# look's HEAD was still in flight when the gate closed).
NEXT_HEAD_WITHIN_S = LOOK_FRESH_S - STOP_LOOK_EVERY_S

# From a request's send (its `send_by` check last before botocore's send; the checks again
# at each connect and before each write, `connectcheck.py`, only shorten what follows) to
# the server host having the whole request, or never having it (review rev38z11 finding 1,
# its second facet: "connect + read after the send" left out the request's own writes).
# Each step has its own timeout:
# - the TCP connect, `CONNECT_TIMEOUT_S`; on https the TLS handshake after it, on the same
#   socket timeout (CPython's `do_handshake` waits on one deadline of the socket's timeout);
# - the request's two writes, the headers, then the body (`urllib3.HTTPConnection.request`:
#   `endheaders()`, then `send(chunk)`; a bytes body is one chunk; seen: a 22,516-byte
#   DeleteObjects body in one `sendall` after an 845-byte header one, task s28j's report),
#   each under `CONNECT_TIMEOUT_S`: urllib3 sets the connection's timeout to the connect
#   timeout before it sends the request and to the read timeout only after
#   (`connectionpool._make_request`, urllib3 2.8.0), and `sendall`'s timeout "is now the
#   maximum total duration to send all data" (Python 3.5+, https://docs.python.org/3/
#   library/socket.html#socket.socket.sendall);
# - then `READ_TIMEOUT_S` for the answer's first byte. A server answers once it has the
#   request; with no answer by then the attempt ends, its close a reset
#   (`store/resetclose.py`): what was not delivered by then never is.
# Not counted: bytes the client's kernel delivers after a write returned and before the
# read gave up are within that wait; a read that trickles on after the first byte is after
# the server had the request (item 2).
REQUEST_IN_WITHIN_S = 4 * CONNECT_TIMEOUT_S + READ_TIMEOUT_S

# How long after a task's attempt ENDED (answered, or given up) the server may still apply
# a copy of its request, as the bound allows (item 3): `READ_TIMEOUT_S`, with
# `CONNECT_TIMEOUT_S` to spare (it was "after the send": a connect, then a first answer).
# The live driver's wait for a batch whose keys an answer did not decide (from the end of
# the latest attempt naming them, `stage.SENT_APPLIED_S`) and a recovery's for a round
# whose tasks are gone (from when they were seen gone, after their attempts ended:
# `recover.py`, review rev38z5 finding 2) are this long, on a store behind a server.
APPLIED_WITHIN_S = CONNECT_TIMEOUT_S + READ_TIMEOUT_S

# The longest a recovery waits, whatever a START says (a damaged or hostile START cannot
# hold `gc-admin show` for hours).
MAX_STOP_WITHIN_S = 900.0


def send_within_s(lease_s: float) -> float:
    """How long after its "go on?" a task may still send a request of that batch: a quarter
    of the lease less the last request's way into the server (`REQUEST_IN_WITHIN_S`; 600 s
    lease: 50 s)."""
    return max(1.0, lease_s / 4 - REQUEST_IN_WITHIN_S)


def stop_within_s(lease_s: float) -> float:
    """From STOP durable to the round's last request's last copy applied (item 4): the
    look's freshness, then a quarter of the lease to the last request in the server's hands,
    then `READ_TIMEOUT_S` for it (or a copy an intermediary sent as it came) to be applied
    (600 s lease: 300 s)."""
    return LOOK_FRESH_S + send_within_s(lease_s) + REQUEST_IN_WITHIN_S + READ_TIMEOUT_S
