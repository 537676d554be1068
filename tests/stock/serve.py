"""Serve an app on an inherited listening socket: `python serve.py FD module:app`.

Not `uvicorn --fd`: uvicorn takes any descriptor it is given for a Unix socket, so TCP_NODELAY is
never set and Nagle's algorithm adds ~40 ms to every reply written in two parts.
"""

import socket
import sys

import uvicorn

uvicorn.Server(uvicorn.Config(sys.argv[2], log_level="warning")).run(sockets=[socket.socket(fileno=int(sys.argv[1]))])
