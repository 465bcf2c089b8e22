"""An iteration's proposals built into variants: each one's code (the LLM's own, else its
family plugin's), written to the run folder and validated; the state keeps every variant
built, without its source, for lineage."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from experiments.records import VariantRejectedRecord, append_record
from experiments.runfolder import code_file
from strategies.codegen import code_sha256
from strategies.family_api import FamilyRegistry, Proposal
from strategies.spec import StrategySpec, StrategyVariant
from strategies.validate import validate_code
from swarm.context import RunContext
from swarm.state import StoredVariant


def index_entry(variant: StrategyVariant, class_name: str | None) -> StoredVariant:
    """A variant as ``all_variants`` keeps it: everything but the code, plus where the code is."""
    fields = {k: v for k, v in variant if k != "code"}
    return StoredVariant(**fields, code_file=code_file(variant.variant_id), class_name=class_name)


def with_code(ctx: RunContext, entry: StoredVariant) -> dict[str, Any]:
    """An ``all_variants`` entry as ``variants.json`` holds it (JSON), with its
    (sha256-verified) source put back."""
    code = ctx.run.read_code(entry.variant_id, entry.code_sha256)
    return entry.model_dump(mode="json") | {"code": code}


def build_variants(
    reg: FamilyRegistry,
    ctx: RunContext,
    proposals: list[Proposal],
    custom_code: dict[str, str],
    all_variants: dict[str, StoredVariant],
    *,
    iteration: int,
    route: str,
) -> tuple[list[StrategyVariant], dict[str, StoredVariant], int]:
    """Each proposal's code (the LLM's own, else its family's), written and validated; every
    variant built stays in ``all_variants`` for lineage, the rejected ones get a record."""
    variants: list[StrategyVariant] = []
    rejected = 0
    for k, prop in enumerate(proposals, start=1):
        spec: StrategySpec = prop.spec
        variant_id = f"i{iteration:02d}-v{k:02d}-{spec.family.value}-{spec.trial_key()[:6]}"
        code = custom_code.get(spec.trial_key())
        if code is None:
            code = reg.for_spec(spec).code(ctx, spec)
            if code is None:  # e.g. the LLM budget ran out: the gate's budget stop ends the run
                continue
        variant = StrategyVariant(
            variant_id=variant_id,
            parent_id=prop.parent_id,
            iteration=iteration,
            route=route,
            spec=spec,
            code=code,
            code_sha256=code_sha256(code),
        )
        ctx.run.write_text(code_file(variant_id), variant.code)
        report = validate_code(variant.code)
        # Every variant ever built stays in the state for lineage, without its source (which
        # is in strategies/<id>.py): the state is checkpointed at every super-step.
        all_variants[variant_id] = index_entry(variant, report.class_name)
        if not report.ok:
            rejected += 1
            append_record(
                ctx.run.tracker,
                VariantRejectedRecord(
                    run_id=ctx.run.root.name,
                    iteration=iteration,
                    route=route,
                    variant_id=variant_id,
                    parent_id=prop.parent_id,
                    code_sha256=variant.code_sha256,
                    errors=report.errors,
                    symbols=ctx.symbols,
                    recorded_at=datetime.now(UTC).isoformat(),
                ),
            )
            continue
        variants.append(variant)
    return variants, all_variants, rejected
