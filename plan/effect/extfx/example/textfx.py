#!/usr/bin/env python3
"""An example executor speaking amduat-executor/1 (SPECS.md section 23.5).

It performs text operations on its inputs, chosen by the params' "op":

  upper      output "upper": input "text" in ASCII upper case
  wordcount  output "count": the number of white-space separated words of
             input "text", in decimal
  fail       answers an error frame with the params' "class",
             "retry_after_ms" and "message" (to show the error frame)

Run it from a policy entry such as
  {"name": "text", "path": "/usr/bin/python3",
   "args": ["/path/to/textfx.py"]}
and call it from a plan step whose effect is "text". Python 3 standard
library only.
"""

import base64
import json
import sys

PROTOCOL = "amduat-executor/1"
NAME = "textfx"
VERSION = "1.0.0"


class Failure(Exception):
    def __init__(self, cls, message, retry_after_ms=0):
        super().__init__(message)
        self.cls = cls
        self.message = message
        self.retry_after_ms = retry_after_ms


def send(frame):
    # One JSON object per line; json.dumps escapes every newline inside it.
    sys.stdout.write(json.dumps(frame, separators=(",", ":"), sort_keys=True) + "\n")
    sys.stdout.flush()


def perform(params, inputs):
    op = params.get("op")
    if op == "upper":
        return {"upper": need(inputs, "text").upper()}
    if op == "wordcount":
        return {"count": str(len(need(inputs, "text").split())).encode()}
    if op == "fail":
        raise Failure(params.get("class", "invalid_input"), params.get("message", ""),
                      params.get("retry_after_ms", 0))
    raise Failure("invalid_input", "unknown op %r" % (op,))


def need(inputs, name):
    if name not in inputs:
        raise Failure("invalid_input", "no input named %r" % (name,))
    return inputs[name]


def main():
    stdin = sys.stdin.buffer
    hello = json.loads(stdin.readline())
    if hello.get("type") != "hello" or hello.get("protocol") != PROTOCOL:
        sys.stderr.write("textfx: expected a hello of %s\n" % PROTOCOL)
        return 2
    send({"type": "hello", "protocol": PROTOCOL, "name": NAME, "version": VERSION})
    for line in stdin:
        frame = json.loads(line)
        if frame.get("type") != "call":
            sys.stderr.write("textfx: expected a call frame\n")
            return 2
        inputs = {i["name"]: base64.b64decode(i["data"]) for i in frame.get("inputs", [])}
        try:
            outputs = perform(frame.get("params") or {}, inputs)
        except Failure as f:
            answer = {"type": "error", "id": frame["id"], "class": f.cls, "message": f.message}
            if f.retry_after_ms:
                answer["retry_after_ms"] = f.retry_after_ms
            send(answer)
            continue
        send({"type": "result", "id": frame["id"], "outputs": [
            {"name": name, "data": base64.b64encode(data).decode("ascii")}
            for name, data in sorted(outputs.items())]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
