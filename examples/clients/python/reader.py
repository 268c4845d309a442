#!/usr/bin/env python3
"""Reads COUNT messages of a topic from the earliest one, then exits.

Usage: reader.py COUNT   (PULSAR_WS_URL and TOPIC from the environment)
"""
import base64
import json
import os
import sys

import websocket

BASE = os.environ.get("PULSAR_WS_URL", "ws://localhost:8080")
TOPIC = os.environ.get("TOPIC", "my-topic")
COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1

ws = websocket.create_connection(f"{BASE}/ws/v2/reader/persistent/public/default/{TOPIC}?messageId=earliest",
                                 timeout=30)
for _ in range(COUNT):
    msg = json.loads(ws.recv())
    print("read", msg["messageId"], base64.b64decode(msg["payload"]).decode("utf-8"))
    # A reader's "ack" only returns credit to the edge.
    ws.send(json.dumps({"messageId": msg["messageId"]}))
ws.close()
