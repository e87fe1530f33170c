"""The typed `websearch_configs` section: each web search provider's settings (keys from the YAML or
the provider's environment variable, never from a tool call)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr

from .base import Section


class WebProviderConfig(Section):
    """What every web search provider takes. The key may also come from the provider's env variable."""

    api_key: SecretStr | None = None  # never shown in logs, errors or results
    base_url: str | None = None  # None = the provider's public endpoint
    timeout: float = Field(30.0, gt=0)  # seconds per request
    # retries of a timeout, 429 or 5xx, with exponential backoff (`retries` is UltraRAG's name for it)
    max_retries: int = Field(3, ge=0, validation_alias=AliasChoices("max_retries", "retries"))
    base_delay: float = Field(1.0, ge=0)  # first backoff in seconds; doubles each retry, plus jitter
    search_kwargs: dict[str, Any] = {}  # more arguments for the provider's search call (UltraRAG's key)


class ExaConfig(WebProviderConfig):
    search_type: str = "auto"  # Exa's `type`: auto, fast, neural, deep, ...; checked by Exa
    max_characters: int = Field(3000, ge=1)  # page text returned per hit
    category: str | None = None


class TavilyConfig(WebProviderConfig):
    search_depth: Literal["basic", "advanced", "fast", "ultra-fast"] = "basic"
    topic: Literal["general", "news", "finance"] = "general"
    include_raw_content: bool = False  # true: the page text instead of Tavily's snippet


class ZhipuAIConfig(WebProviderConfig):
    search_engine: Literal["search_std", "search_pro", "search_pro_sogou", "search_pro_quark"] = "search_std"
    search_intent: bool = False
    search_recency_filter: Literal["oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"] = "noLimit"
    content_size: Literal["medium", "high"] = "medium"


class WebsearchConfigs(Section):
    exa: ExaConfig = ExaConfig()
    tavily: TavilyConfig = TavilyConfig()
    zhipuai: ZhipuAIConfig = ZhipuAIConfig()
