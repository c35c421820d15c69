"""The routes of ``memcurator serve``, one module per area, each an :class:`fastapi.APIRouter`.

:func:`memcurator.service.app.create_app` only assembles them. Every route reads what it
needs from the application's state through the dependencies of :mod:`.deps` (the caller's
key, the tenants, the hub, the metrics), so no route is a closure inside the factory.

======================  ==============================================================
module                  routes
======================  ==============================================================
:mod:`.health`          ``/healthz``, ``/metrics``
:mod:`.entries`         ``/v1/write``, ``/v1/entries[/{id}]`` (list, get, update,
                        delete), ``/v1/decisions``
:mod:`.recall`          ``/v1/recall``
:mod:`.feedback`        ``/v1/feedback``, ``/v1/record``
:mod:`.admin`           ``/v1/namespaces[/{name}]``, ``/v1/forget-all``
:mod:`.hub`             ``/v1/hub/*`` (the peers' hub)
:mod:`.embeddings`      ``/v1/embeddings`` (OpenAI-compatible)
:mod:`.provenance`      ``/v1/observations`` (what the agent read, per key session)
======================  ==============================================================
"""
