/// The model's dates are RFC 3339 (`Timestamps`): every user of the model uses the same codec.
@_exported import Timestamps
