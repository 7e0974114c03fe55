"""Context management plugged into the agent loops people already use. Each adapter is an
optional extra, imported only when its module is:

- :mod:`ctxwindow.integrations.langchain` (``pip install 'ctxwindow[langchain]'``): a LangChain v1
  ``AgentMiddleware`` for ``create_agent`` and a ``token_counter`` for ``trim_messages``;
- :mod:`ctxwindow.integrations.pydantic_ai` (``pip install 'ctxwindow[pydantic-ai]'``): a history
  processor for Pydantic AI 2.x;
- :mod:`ctxwindow.integrations.openai_agents` (``pip install 'ctxwindow[openai-agents]'``): a
  ``Session`` wrapper and a ``call_model_input_filter`` for the OpenAI Agents SDK.

Each keeps one :class:`~ctxwindow.ContextWindow` per conversation and hands it the framework's
full history with :meth:`~ctxwindow.ContextWindow.sync`, so only new messages are converted and
counted; what the model receives is exactly the window's ``messages()`` (its system blocks
included: the system prompt, standing instructions, context, notes, recall) converted back, with
the framework's own objects wherever the window did not change a message.
"""

__all__ = ["langchain", "pydantic_ai", "openai_agents"]
