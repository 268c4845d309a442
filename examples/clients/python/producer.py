#!/usr/bin/env python3
"""Publishes messages to Sluice (or any Pulsar WebSocket endpoint) and checks every ack.

Usage: producer.py [COUNT]   (PULSAR_WS_URL defaults to ws://localhost:8080, TOPIC to my-topic)
Needs the websocket-client package (Debian: python3-websocket).
"""
import base64
import json
import os
import sys

import websocket

BASE = os.environ.get("PULSAR_WS_URL", "ws://localhost:8080")
TOPIC = os.environ.get("TOPIC", "my-topic")
COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1

ws = websocket.create_connection(f"{BASE}/ws/v2/producer/persistent/public/default/{TOPIC}", timeout=30)
for i in range(COUNT):
    payload = base64.b64encode(f"Hello World {i}".encode("utf-8")).decode("ascii")
    # context may be a number, as in the Pulsar docs; it comes back as a string.
    ws.send(json.dumps({"payload": payload, "properties": {"key1": "value1", "n": str(i)}, "context": i}))
failed = 0
for _ in range(COUNT):
    ack = json.loads(ws.recv())
    if ack["result"] != "ok":
        failed += 1
        print("failed to publish:", ack, file=sys.stderr)
    else:
        print("published", ack["context"], ack["messageId"])
ws.close()
sys.exit(1 if failed else 0)
