"""What every layer of ctindex may use and that uses no layer above it:
bounded reads of state files (statefile.py), loading the optional C modules
(native_modules.py), text and JSON output (output.py), data made safe to
print on a terminal (printable.py), the standard streams a command refuses
and the one line for output lost (streams.py), close-match suggestions
(suggest.py), the colour decision (tty.py), the type of a JSON
value of unchecked shape (jsontypes.py)."""
