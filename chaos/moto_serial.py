"""moto's HTTP server (S3 and DynamoDB APIs), answering one request at a time.

`moto_server` serves requests on threads and its DynamoDB backend takes no
lock, so two conditional writes to one item can both succeed; real DynamoDB
serialises them. Serving one request at a time gives the endpoint DynamoDB's
atomic conditional writes, which is what the lock tests depend on.

Usage: python -m chaos.moto_serial HOST PORT [--threaded]
(`--threaded` serves requests concurrently, for bulk S3 loads that need no atomicity.)
"""

from __future__ import annotations

import signal
import sys

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    threaded = "--threaded" in sys.argv[3:]
    run_simple(host, port, app, threaded=threaded, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
