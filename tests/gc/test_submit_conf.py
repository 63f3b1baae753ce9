"""`spark.epochgc.*` conf as option defaults for spark-submit runs (no Spark needed)."""

from __future__ import annotations

import click
import pytest

from epochgc.impl.gc.cli import gc
from epochgc.impl.gc.submit import conf_defaults


def test_every_option_is_settable_as_spark_conf() -> None:
    conf = {
        "spark.epochgc.store": "s3://bucket-a/p",
        "spark.epochgc.s3-endpoint": "http://127.0.0.1:9",
        "spark.epochgc.dry-run": "true",
        "spark.epochgc.delete-concurrency": "16",
        "spark.epochgc.grace": "2h",
        "spark.master": "spark://h:7077",  # other Spark conf is ignored
    }
    ctx = gc.make_context("gc", [], default_map=conf_defaults(conf, gc))
    p = ctx.params
    assert (p["store_url"], p["s3_endpoint"], p["dry_run"]) == (
        "s3://bucket-a/p",
        conf["spark.epochgc.s3-endpoint"],
        True,
    )
    assert (p["delete_concurrency"], p["grace"]) == (16, 7200.0)
    # The command line wins over conf.
    ctx = gc.make_context("gc", ["--delete-concurrency", "2"], default_map=conf_defaults(conf, gc))
    assert ctx.params["delete_concurrency"] == 2
    long_names = {o[2:] for prm in gc.params for o in prm.opts if o.startswith("--")}
    assert conf_defaults({f"spark.epochgc.{n}": "1" for n in long_names}, gc).keys() == {
        prm.name for prm in gc.params if any(o.startswith("--") for o in prm.opts)
    }


def test_unknown_epochgc_conf_is_refused_by_name() -> None:
    with pytest.raises(click.UsageError, match=r"spark\.epochgc\.delete-concurency"):
        conf_defaults({"spark.epochgc.delete-concurency": "8"}, gc)
