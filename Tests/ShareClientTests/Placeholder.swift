// Tests of the Swift client library (being written).
