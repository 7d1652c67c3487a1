"""Generated from thrift_idl/ by thrift_idl/generate.sh; do not edit by hand."""
