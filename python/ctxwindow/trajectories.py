"""What agents write to disk, read as a conversation: mini-swe-agent trajectories, OpenHands
LLM completion logs and chat files that carry their tool definitions. The readers live in
:mod:`ctxwindow.formats`, one module per format; this module keeps their names where they were
first published.

- **mini-swe-agent** ``.traj.json``: :func:`from_mini_swe_agent`
  (:mod:`ctxwindow.formats.mini_swe_agent`);
- **OpenHands** completion logs, a file or a folder of them: :func:`from_openhands_completion`,
  :func:`read_openhands_folder` (:mod:`ctxwindow.formats.openhands`);
- any of these, or a chat (or Responses, or Anthropic) file ``{"messages": [...], "tools":
  [...]}``: :func:`infer_trajectory`, whose tools are returned with the messages, so the tool
  schemas are counted as the API counts them.
"""

from __future__ import annotations

from ctxwindow.formats import (
    Trajectory,
    from_mini_swe_agent,
    from_openhands_completion,
    infer_trajectory,
    read_openhands_folder,
    tools_of,
)

__all__ = ["Trajectory", "from_mini_swe_agent", "from_openhands_completion", "read_openhands_folder",
           "infer_trajectory", "tools_of"]
