"""Validate and serialise records with marshmallow schemas (field objects, nested schemas, errors)."""
import datetime
import random
import sys
import zlib

from marshmallow import Schema, ValidationError, fields, validate


class Address(Schema):
    street = fields.Str(required=True)
    city = fields.Str(required=True)


class User(Schema):
    name = fields.Str(required=True, validate=validate.Length(min=1, max=40))
    email = fields.Email(required=True)
    age = fields.Int(validate=validate.Range(min=0, max=150))
    joined = fields.DateTime()
    address = fields.Nested(Address)


schema = User()
rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1500):
    data = {"name": f"user{i}", "email": f"user{i}@example.com" if rng.random() < 0.9 else "nope",
            "age": rng.randint(-5, 120), "joined": datetime.datetime(2020, 1, 1).isoformat(),
            "address": {"street": f"{i} Main St", "city": rng.choice(["Oslo", "Lima", "Pune"])}}
    try:
        obj = schema.load(data)
        print(i, zlib.crc32(schema.dumps(obj).encode()))
    except ValidationError as err:
        print(i, sorted(err.messages))
