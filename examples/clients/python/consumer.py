#!/usr/bin/env python3
"""Consumes COUNT messages from a subscription, acknowledging each, then exits.

Usage: consumer.py COUNT   (PULSAR_WS_URL, TOPIC and SUBSCRIPTION from the environment)
"""
import base64
import json
import os
import sys

import websocket

BASE = os.environ.get("PULSAR_WS_URL", "ws://localhost:8080")
TOPIC = os.environ.get("TOPIC", "my-topic")
SUB = os.environ.get("SUBSCRIPTION", "my-sub")
COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1

ws = websocket.create_connection(
    f"{BASE}/ws/v2/consumer/persistent/public/default/{TOPIC}/{SUB}?subscriptionInitialPosition=Earliest",
    timeout=30)
for _ in range(COUNT):
    msg = json.loads(ws.recv())
    print("received", msg["messageId"], base64.b64decode(msg["payload"]).decode("utf-8"), msg["properties"])
    ws.send(json.dumps({"messageId": msg["messageId"]}))
ws.close()
