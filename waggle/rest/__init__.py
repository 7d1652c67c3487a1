"""The Iceberg REST door: the Iceberg REST catalog protocol over the same federation as the Thrift port.

A request comes in over HTTP (:mod:`waggle.rest.door`), is checked for its bearer token
(:mod:`waggle.rest.tokens`) and routed (:mod:`waggle.rest.app`); its operation (:mod:`waggle.rest.operations`)
runs pyiceberg's own Hive catalog logic (:mod:`waggle.rest.catalog`) over an in-process HMS connection to waggle's
own call path (:mod:`waggle.rest.loopback`). So a REST request becomes the same calls, plans, names, access
checks, copies and locks as a Thrift client's, as the caller's user; errors come back in the spec's model
(:mod:`waggle.rest.errors`).
"""
