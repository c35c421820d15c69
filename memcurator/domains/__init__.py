"""Domain checks: the plug-ins through which the trust gate judges what an entry's action DOES.

The interface (:class:`~memcurator.trust.domains.DomainCheck`, :class:`~memcurator.trust.domains.
ActionEntry`, :class:`~memcurator.trust.domains.RiskReport`) and the registry
(:data:`~memcurator.trust.domains.DOMAIN_CHECKS`) are the core's; the checks are registered
through the ``memcurator.domain_checks`` entry-point group (pyproject.toml), which is also how a
third party adds one. They depend on the core only: no benchmark or environment module.

- :mod:`memcurator.domains.sql` — an SQL action, dry-run on a copy of the task's schema;
- :mod:`memcurator.domains.bash` — a shell action, static findings and (given a task that
  provides a sandbox) a dry run;
- the generic action check, :class:`memcurator.trust.action_risk.ActionCheck`, lives in the
  trust package, whose tool-output reading it also serves.
"""
