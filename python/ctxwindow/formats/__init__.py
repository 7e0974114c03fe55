"""Providers' and agents' message formats, to and from the canonical chat dicts of
:mod:`ctxwindow.messages` (which re-exports the converters, where users look for them). One
module per format:

- :mod:`~ctxwindow.formats.responses`: OpenAI Responses API items (:func:`from_responses`,
  :func:`to_responses`, :func:`responses_turns`);
- :mod:`~ctxwindow.formats.anthropic`: Anthropic Messages content blocks (:func:`from_anthropic`,
  :func:`to_anthropic`);
- :mod:`~ctxwindow.formats.swe_agent`: SWE-agent ``.traj`` (:func:`from_swe_agent`);
- :mod:`~ctxwindow.formats.tau_bench`: tau-bench records (:func:`from_tau_bench`);
- :mod:`~ctxwindow.formats.mini_swe_agent`: mini-swe-agent ``.traj.json``
  (:func:`from_mini_swe_agent`);
- :mod:`~ctxwindow.formats.openhands`: OpenHands completion logs
  (:func:`from_openhands_completion`, :func:`read_openhands_folder`);
- :mod:`~ctxwindow.formats.trajectory`: what the agents' readers return (:class:`Trajectory`)
  and tool definitions in an API's form (:func:`tools_of`);
- :mod:`~ctxwindow.formats.infer`: recognising a parsed file (:func:`infer_format`,
  :func:`infer_trajectory`).

Each reader of an agent's file returns a :class:`Trajectory`: the canonical messages, the tool
definitions sent with them (when the file has them in a form an API takes) and, per kind, the
records that are not chat messages and were skipped (an ``exit`` record, an error log...). A
skipped record is counted, never an error; a record that claims to be a message but is malformed
raises :class:`~ctxwindow.errors.MalformedMessageError`, as does every converter for a message,
block or item that is not a dict (naming which).

>>> items = [{"role": "user", "content": "weather in Paris?"},
...          {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
...          {"type": "function_call_output", "call_id": "c1", "output": "18 C"}]
>>> [m["role"] for m in from_responses(items)]
['user', 'assistant', 'tool']
>>> to_responses(from_responses(items)) == items
True
"""

from __future__ import annotations

from ctxwindow.formats.anthropic import from_anthropic, to_anthropic
from ctxwindow.formats.infer import infer_format, infer_trajectory
from ctxwindow.formats.mini_swe_agent import from_mini_swe_agent
from ctxwindow.formats.openhands import from_openhands_completion, read_openhands_folder
from ctxwindow.formats.responses import from_responses, responses_turns, to_responses
from ctxwindow.formats.swe_agent import from_swe_agent
from ctxwindow.formats.tau_bench import from_tau_bench
from ctxwindow.formats.trajectory import Trajectory, tools_of

__all__ = [
    "from_responses",
    "to_responses",
    "responses_turns",
    "from_anthropic",
    "to_anthropic",
    "from_swe_agent",
    "from_tau_bench",
    "infer_format",
    "Trajectory",
    "from_mini_swe_agent",
    "from_openhands_completion",
    "read_openhands_folder",
    "infer_trajectory",
    "tools_of",
]
